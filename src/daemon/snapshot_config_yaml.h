// serve.snapshots of the daemon config (failure snapshots, D4;
// docs/config.md "snapshots", docs/snapshots.md):
//
//   snapshots:
//     retention: 168h        # kept this long, then the sweeper deletes them
//     quota: 10Gi            # all snapshots together; oldest evicted first
//     sweep_interval: 1m
//     max_files: 100000      # entries archived per snapshot
//     max_depth: 64
//     max_bytes: 1Gi         # file content read per snapshot
#pragma once

#include "base/result.h"
#include "snapshot/snapshot_store.h"
#include "spec/yaml_reader.h"

namespace corral {

// Reads the map of `entry` (serve.snapshots) into `out`. Unknown keys and
// malformed or zero values are refused with their line.
Status apply_snapshot_config(const YamlReader& reader, const YamlEntry& entry,
                             snapshot::SnapshotConfig& out);

}  // namespace corral
