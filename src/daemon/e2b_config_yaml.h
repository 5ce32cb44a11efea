// serve.e2b of the daemon config (issue 17; docs/config.md "e2b"):
//
//   e2b:
//     enabled: true
//     prefix: /e2b          # E2B_API_URL=http://host:port/e2b
//     network: open         # a create without network options: open, none or a template
//     templates:            # E2B template -> image, pool:<name>, or a create body
//       python: pool:py
//       with-key: {image: python, secrets: [{name: openai, mode: broker}]}
//
// A template's create body is checked when the daemon starts (serve fails
// on one a create would refuse).
#pragma once

#include "base/result.h"
#include "daemon/e2b_settings.h"
#include "spec/yaml_reader.h"

namespace corral {

Status apply_e2b_config(const YamlReader& reader, const YamlEntry& entry,
                        daemon::E2bSettings& out);

// Whether `prefix` is one the facade can serve under ("/e2b").
bool valid_e2b_prefix(std::string_view prefix);

}  // namespace corral
