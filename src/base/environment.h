// Scrubbing the environment a process inherited (issue 12, item 7): the
// daemon's environment may hold secrets (serve.secrets.env and
// env_prefix read them from there), and every process forked from it
// carries a copy. /proc/<pid>/environ shows the block the kernel laid out
// at exec, whatever `environ` says later, so dropping a variable means
// overwriting its bytes where they are, not only unsetenv().
#pragma once

#include <cstddef>
#include <string_view>

namespace corral {

// Keeps only the variables named in keep[0..count) and overwrites every
// other one with zeros: the whole initial block (/proc/self/environ),
// except the kept strings, and every string `environ` points at outside it
// (set later with setenv). `environ` is then rewritten in place to the kept
// ones. Allocates nothing and takes no lock, so a child forked or cloned
// from a process with threads may call it.
void scrub_environment(const std::string_view* keep, std::size_t count) noexcept;

}  // namespace corral
