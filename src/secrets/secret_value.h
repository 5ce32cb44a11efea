// SecretValue: the bytes of one secret, held where they cannot leak by
// accident (S6). The memory comes from libsodium's guarded allocator:
// locked (never swapped to disk), fenced by guard pages, excluded from core
// dumps, and zeroed when the value is dropped. Nothing converts a
// SecretValue to a string implicitly: code that needs the bytes asks for a
// view, so every place a value is used can be found by `view()`.
#pragma once

#include <cstddef>
#include <string_view>

namespace corral::secrets {

class SecretValue {
 public:
  SecretValue() = default;
  // Copies `bytes` into guarded memory. The caller should wipe its own copy
  // (wipe() below). Throws std::bad_alloc if no memory can be mapped.
  // Locking is best effort: libsodium ignores a failed mlock, so without
  // CAP_IPC_LOCK and over RLIMIT_MEMLOCK the pages are not locked (the
  // daemon runs as root and has the capability).
  explicit SecretValue(std::string_view bytes);
  SecretValue(const SecretValue& other);
  SecretValue& operator=(const SecretValue& other);
  SecretValue(SecretValue&& other) noexcept;
  SecretValue& operator=(SecretValue&& other) noexcept;
  ~SecretValue();

  std::string_view view() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Constant-time comparison (tokens are compared with this, too).
  bool equals(std::string_view other) const;

 private:
  void release() noexcept;
  char* data_ = nullptr;
  std::size_t size_ = 0;
};

// Zeroes memory in a way the compiler cannot drop (sodium_memzero).
void wipe(void* data, std::size_t size) noexcept;
void wipe(std::string& s) noexcept;

// Initialises libsodium once (thread-safe); false if it cannot (no entropy
// source). Every function of this layer calls it first.
bool sodium_ready() noexcept;

}  // namespace corral::secrets
