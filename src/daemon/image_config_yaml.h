// serve.images of the daemon config (daemon/image_settings.h).
#pragma once

#include "base/result.h"
#include "daemon/image_settings.h"
#include "spec/yaml_reader.h"

namespace corral {

Status apply_image_config(const YamlReader& reader, const YamlEntry& entry,
                          daemon::ImageSettings& out);

}  // namespace corral
