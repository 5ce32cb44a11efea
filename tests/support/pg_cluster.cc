#include "support/pg_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "store/sql_postgres.h"

namespace corral::testing {
namespace {

namespace fs = std::filesystem;

// The newest server of /usr/lib/postgresql/<version>/bin.
std::string server_bin() {
  std::string best;
  int best_v = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string v = e.path().filename();
    const int n = std::atoi(v.c_str());
    if (n > best_v && fs::exists(e.path() / "bin" / "postgres")) {
      best_v = n;
      best = (e.path() / "bin").string();
    }
  }
  return best;
}

std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  std::uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

std::string random_password() {
  static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device rd;
  std::string out;
  for (int i = 0; i < 24; ++i) out += kAlphabet[rd() % (sizeof kAlphabet - 1)];
  return out;
}

// Runs argv as user `pw` (its uid and gid, no other groups), output to
// `log`; the child's pid, or -1.
pid_t spawn_as(const passwd& pw, const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out >= 0) {
    ::dup2(out, 1);
    ::dup2(out, 2);
  }
  int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, 0);
  if (::setgroups(0, nullptr) != 0 || ::setgid(pw.pw_gid) != 0 || ::setuid(pw.pw_uid) != 0)
    ::_exit(126);
  // The server goes with the test process, even one that crashed (set after
  // setuid, which clears it).
  ::prctl(PR_SET_PDEATHSIG, SIGQUIT);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

std::string tail_of(const std::string& path) {
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
}

}  // namespace

Result<std::unique_ptr<PgCluster>> PgCluster::start() {
  std::unique_ptr<PgCluster> c(new PgCluster());
  c->bin_ = server_bin();
  if (c->bin_.empty())
    return make_error(ErrorCode::kUnavailable,
                      "no PostgreSQL server in /usr/lib/postgresql (scripts/install-deps installs "
                      "Debian's postgresql)");
  const passwd* pw = ::getpwnam("postgres");
  if (pw == nullptr) return make_error(ErrorCode::kUnavailable, "no `postgres` user on this host");
  if (::geteuid() != 0) return make_error(ErrorCode::kUnavailable, "starting a cluster needs root");
  char tmpl[] = "/tmp/corral-pg-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return errno_error("mkdtemp");
  c->dir_ = tmpl;
  c->password_ = random_password();
  const std::string pwfile = c->dir_ + "/pw";
  {
    std::ofstream f(pwfile);
    f << c->password_ << "\n";
  }
  if (::chown(c->dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0 ||
      ::chown(pwfile.c_str(), pw->pw_uid, pw->pw_gid) != 0 || ::chmod(pwfile.c_str(), 0600) != 0)
    return errno_error("chown " + c->dir_);
  const std::string log = c->dir_ + "/initdb.log";
  pid_t pid =
      spawn_as(*pw,
               {c->bin_ + "/initdb", "-D", c->dir_ + "/data", "-U", "corral", "--pwfile=" + pwfile,
                "--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"},
               log);
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    return make_error(ErrorCode::kSystem, "initdb failed: " + tail_of(log));
  c->port_ = free_port();
  CORRAL_TRY(c->start_server());
  return c;
}

Status PgCluster::start_server() {
  const passwd* pw = ::getpwnam("postgres");
  const std::string log = dir_ + "/server.log";
  for (int attempt = 0; attempt < 3; ++attempt) {
    pid_ = spawn_as(*pw,
                    {bin_ + "/postgres", "-D", dir_ + "/data", "-p", std::to_string(port_), "-c",
                     "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + dir_, "-c",
                     "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200"},
                    log);
    if (pid_ < 0) return errno_error("fork");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;  // exited: the port was taken meanwhile, or worse
      }
      if (sql::PgConnection::open(url())) return ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (pid_ > 0) {
      stop(true);
      return make_error(ErrorCode::kTimeout,
                        "PostgreSQL did not accept connections in 30 s: " + tail_of(log));
    }
    port_ = free_port();
  }
  return make_error(ErrorCode::kSystem, "PostgreSQL would not start: " + tail_of(log));
}

void PgCluster::stop(bool crash) {
  if (pid_ <= 0) return;
  ::kill(pid_, crash ? SIGQUIT : SIGINT);
  for (int i = 0; i < 200; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

Status PgCluster::restart(bool crash) {
  stop(crash);
  return start_server();
}

PgCluster::~PgCluster() {
  stop(false);
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string PgCluster::url(const std::string& database) const {
  return "postgres://corral:" + password_ + "@127.0.0.1:" + std::to_string(port_) + "/" + database;
}

Result<std::string> PgCluster::create_database(const std::string& name) {
  auto c = sql::PgConnection::open(url());
  if (!c) return tl::unexpected<Error>(std::move(c).error());
  CORRAL_TRY((*c)->exec("CREATE DATABASE \"" + name + "\"", "CREATE DATABASE " + name));
  return url(name);
}

Result<std::string> PgCluster::fresh_database() {
  return create_database("t" + std::to_string(++databases_));
}

PgCluster* PgCluster::shared(std::string& why) {
  static std::unique_ptr<PgCluster> cluster;
  static std::string failure;
  static bool tried = false;
  if (!tried) {
    tried = true;
    auto c = start();
    if (c)
      cluster = std::move(*c);
    else
      failure = c.error().message;
  }
  why = failure;
  return cluster.get();
}

}  // namespace corral::testing
