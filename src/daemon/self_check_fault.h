// A test-only fault for the self-check's tests (tests/integration/
// daemon_self_check_test.cc): CORRAL_TEST_SELF_CHECK_FAULT in the daemon's
// environment breaks the REAL thing a check looks at, in the sandbox being
// checked, just before the checks run. The tests need it because nothing a
// client can ask for leaves a fresh sandbox broken this way (corral writes
// secret files 0400 and refuses a spec its layer cannot hold), and a check
// that is never seen failing proves nothing. Unset (production): nothing.
//
//   layer_full           fills the writable layer until the kernel says ENOSPC
//   secret_file_missing  unlinks every file-mode secret's file
//   secret_file_mode     makes every file-mode secret's file 0644
//   secret_broker_revoked  revokes every broker token of the sandbox
#pragma once

namespace corral::daemon {

class SandboxService;
struct SandboxEntry;

void apply_self_check_fault(SandboxService& service, SandboxEntry& sandbox);

}  // namespace corral::daemon
