// The names a volume mount is made of (D2, F4; docs/volumes.md): a volume's
// name and namespace, and the sub-path of a volume a sandbox is given.
// Checked lexically here; the daemon then resolves the sub-path inside the
// mounted volume with openat2 (volume/volume_store.h), which is what
// refuses symlinks.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace corral {

// [a-z0-9][a-z0-9._-]{0,62}: a volume's name, and a namespace's.
bool is_valid_volume_name(std::string_view name);

// A sub-path of a volume: relative (no leading '/'), no ".." component, no
// NUL, at most 4095 bytes. Returns it normalized: repeated '/', "."
// components and a trailing '/' removed; "" for the volume's root ("" and
// "." both mean it). Errors (kInvalidArgument) say which rule was broken.
Result<std::string> normalize_volume_subpath(std::string_view subpath);

}  // namespace corral
