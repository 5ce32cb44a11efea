#include "secrets/secret_value.h"

#include <sodium.h>

#include <cstring>
#include <new>
#include <string>
#include <utility>

namespace corral::secrets {

bool sodium_ready() noexcept {
  static const bool ok = ::sodium_init() >= 0;
  return ok;
}

void wipe(void* data, std::size_t size) noexcept {
  if (data && size) ::sodium_memzero(data, size);
}

void wipe(std::string& s) noexcept {
  // The whole capacity: a shrunk string keeps old bytes past its size.
  if (s.capacity()) wipe(s.data(), s.capacity());
  s.clear();
}

SecretValue::SecretValue(std::string_view bytes) {
  if (!sodium_ready()) throw std::bad_alloc();
  if (bytes.empty()) return;
  // sodium_malloc: mlock'ed, guard pages, MADV_DONTDUMP; freed with
  // sodium_free, which zeroes first.
  data_ = static_cast<char*>(::sodium_malloc(bytes.size()));
  if (!data_) throw std::bad_alloc();
  std::memcpy(data_, bytes.data(), bytes.size());
  size_ = bytes.size();
  ::sodium_mprotect_readonly(data_);
}

SecretValue::SecretValue(const SecretValue& other) : SecretValue(other.view()) {}

SecretValue& SecretValue::operator=(const SecretValue& other) {
  if (this != &other) *this = SecretValue(other.view());
  return *this;
}

SecretValue::SecretValue(SecretValue&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

SecretValue& SecretValue::operator=(SecretValue&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SecretValue::~SecretValue() { release(); }

void SecretValue::release() noexcept {
  if (data_) ::sodium_free(data_);  // zeroes, then unlocks and unmaps
  data_ = nullptr;
  size_ = 0;
}

bool SecretValue::equals(std::string_view other) const {
  if (other.size() != size_) return false;
  if (size_ == 0) return true;
  return ::sodium_memcmp(data_, other.data(), size_) == 0;
}

}  // namespace corral::secrets
