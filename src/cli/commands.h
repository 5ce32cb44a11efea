// One function per `corral` verb; main.cc dispatches on argv[1].
// Each returns the process exit code.
#pragma once

namespace corral::cli {

int run_command(int argc, char** argv);     // corral run [options] -- CMD...
int doctor_command(int argc, char** argv);  // corral doctor
int image_command(int argc, char** argv);   // corral image build|import|ls|rm
int audit_command(int argc, char** argv);   // corral audit verify|tail
int serve_command(int argc, char** argv);   // corral serve (the daemon)
int client_command(int argc, char** argv);  // corral create|ls|inspect|exec|cp|rm

// corral secrets keygen|encrypt|check (the daemon's secret store files)
int secrets_command(int argc, char** argv);

// corral snapshot ls|get|rm (the daemon's failure snapshots, D4)
int snapshot_command(int argc, char** argv);

}  // namespace corral::cli
