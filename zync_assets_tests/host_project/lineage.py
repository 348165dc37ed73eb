"""Prints, as JSON, where zync-assets was imported from and each asset's parents."""

import json

from host_project.definitions import defs

import zync_assets

graph = defs.resolve_asset_graph()
parents = {
    key.to_user_string(): sorted(p.to_user_string() for p in graph.get(key).parent_keys)
    for key in graph.get_all_asset_keys()
}
print(json.dumps({"zync_assets": zync_assets.__file__, "parents": parents}))
