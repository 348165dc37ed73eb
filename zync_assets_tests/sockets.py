"""The TCP ports a process group listens on, read from /proc (Linux): what `ss -ltnp`
shows, without needing it installed."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

LISTEN = "0A"  # the kernel's TCP_LISTEN state in /proc/net/tcp*


def group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp ...
        if int(fields[2]) == pgid:
            pids.append(int(entry.name))
    return pids


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except OSError:
        pass  # exited, or not ours to read
    return inodes


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp's `0100007F` (4 bytes) or tcp6's 32 hex digits, each 32-bit word in
    the host's (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    swapped = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(swapped)


def listening(pgid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state held by the process group."""
    inodes = set().union(*(_socket_inodes(pid) for pid in group_pids(pgid)))
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == LISTEN and inode in inodes:
                address, port = local.split(":")
                found.append((str(_address(address)), int(port, 16)))
    return found


def is_loopback(address: str) -> bool:
    parsed = ipaddress.ip_address(address)
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return parsed.is_loopback
