// Where corral keeps things on the host. Overridable for tests and for
// unusual hosts with CORRAL_DATA_DIR and CORRAL_RUN_DIR.
#pragma once

#include <string>

namespace corral {

// Persistent: images, the host-base skeleton. Default /var/lib/corral.
std::string data_dir();
// Volatile: locks, mount staging. Default /run/corral.
std::string run_dir();

}  // namespace corral
