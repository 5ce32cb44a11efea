// SHA-256 (FIPS 180-4), streaming. Used by the audit log's hash chain and for
// the digests of files the daemon moves in and out of sandboxes. Our own
// implementation so the base layer needs no crypto library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace corral {

class Sha256 {
 public:
  using Digest = std::array<std::uint8_t, 32>;

  Sha256() { reset(); }

  void reset();
  void update(const void* data, std::size_t len);
  void update(std::string_view data) { update(data.data(), data.size()); }
  // Finishes the hash and returns it; the object is reset afterwards, so it
  // can hash the next message.
  Digest final();

  // Lower-case hex, 64 characters.
  static std::string hex(const Digest& digest);

 private:
  void compress(const std::uint8_t* block);

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_;
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

// One-shot helper: lower-case hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace corral
