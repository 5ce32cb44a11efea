// serve.object_store of the daemon config (docs/config.md "object_store";
// REQUIREMENTS D5): which store task inputs, outputs and snapshots live in.
//
//   object_store:
//     kind: local                      # or s3
//     path: /var/lib/corral/objects    # local; default <data_dir>/objects
//     endpoint: https://s3.example.com # s3: path-style, no bucket in it
//     bucket: corral
//     prefix: prod/
//     region: us-east-1
//     access_key_secret: s3_access_key # names of secret-store entries
//     secret_key_secret: s3_secret_key
//     timeout: 30s                     # connect, and any stall
#pragma once

#include "base/result.h"
#include "objstore/object_store_config.h"
#include "spec/yaml_reader.h"

namespace corral {

// Reads the map of `entry` (serve.object_store) into `out`. Unknown keys,
// malformed values and settings of the other kind are refused with their
// line; an s3 store without endpoint, bucket or either secret name too.
Status apply_object_store_config(const YamlReader& reader, const YamlEntry& entry,
                                 objstore::ObjectStoreConfig& out);

}  // namespace corral
