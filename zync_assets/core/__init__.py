"""zync's shared vocabulary, below every stage: errors, offsets, durations, settings, where files live."""
