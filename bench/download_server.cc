// The upstream of bench/sandbox_download.sh: answers every HTTP request on
// ADDRESS:PORT with BYTES bytes (1 MiB writes), one thread per connection.
// Usage: corral_bench_download_server ADDRESS PORT BYTES
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

void serve(int fd, long long total) {
  std::string request;
  char buf[4096];
  while (request.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    request.append(buf, static_cast<std::size_t>(n));
  }
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(total) +
                           "\r\nConnection: close\r\n\r\n";
  (void)!::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  static const std::vector<char> block(1 << 20, 'x');
  for (long long left = total; left > 0;) {
    const auto want = static_cast<std::size_t>(std::min<long long>(left, block.size()));
    ssize_t n = ::send(fd, block.data(), want, MSG_NOSIGNAL);
    if (n <= 0) break;
    left -= n;
  }
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s ADDRESS PORT BYTES\n", argv[0]);
    return 2;
  }
  const long long total = std::atoll(argv[3]);
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<std::uint16_t>(std::atoi(argv[2])));
  if (::inet_pton(AF_INET, argv[1], &at.sin_addr) != 1 ||
      ::bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
      ::listen(listener, 16) != 0) {
    std::perror("download server");
    return 1;
  }
  for (;;) {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) std::thread(serve, fd, total).detach();
  }
}
