// Images by digest (issue 18 point 4, docs/images.md "Pulling by digest"),
// against a real OCI registry on loopback (Debian's docker-registry): an
// image pushed with skopeo is pulled by its manifest digest, by the CLI and
// by the daemon when a create names it, verified on arrival (a registry
// that serves other bytes for the digest is refused and nothing is kept),
// used by a sandbox, named by digest alone once a node has it, and evicted
// least recently used first past serve.images.cache_max; a create may not
// make the daemon pull from a registry the config does not list. An image
// of one store pushed with `corral image push` is pulled into another by
// the reference the push printed, env and workdir included.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/daemon_harness.h"
#include "support/loopback_registry.h"
#include "support/sandbox_harness.h"
#include "support/skip.h"

namespace corral::testing {
namespace {

using nlohmann::json;

class ImagePull : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!registry_tools_present(why)) CORRAL_SKIP_OR_FAIL(why);
    dir_ = make_temp_dir("image-pull");
    data_ = dir_ + "/data";
    std::filesystem::create_directories(data_);
    if (const char* old = std::getenv("CORRAL_DATA_DIR")) old_ = old;
    setenv("CORRAL_DATA_DIR", data_.c_str(), 1);
    std::filesystem::create_directories(dir_ + "/registry");
    registry_ = std::make_unique<LoopbackRegistry>(dir_ + "/registry");
    if (!registry_->up()) GTEST_FAIL() << "the registry did not start";
  }
  void TearDown() override {
    registry_.reset();
    if (old_.empty()) {
      unsetenv("CORRAL_DATA_DIR");
    } else {
      setenv("CORRAL_DATA_DIR", old_.c_str(), 1);
    }
    if (!dir_.empty()) host_sh("rm -rf " + sh_quote(dir_));
  }

  // Pushes a one-busybox image whose /etc/marker holds `marker` to
  // <registry>/<repo>:v; returns its manifest digest ("" on failure).
  std::string push(const std::string& repo, const std::string& marker,
                   const std::string& env = "") {
    return registry_->push_busybox(dir_, repo, marker, env);
  }
  std::string ref(const std::string& repo, const std::string& digest) const {
    return registry_->ref(repo, digest);
  }
  std::string stored_blob(const std::string& digest) const {
    return registry_->stored_blob(digest);
  }
  // What an image store holds (the CLI's: CORRAL_DATA_DIR; a daemon's:
  // its data_dir).
  std::vector<std::string> images_entries(const std::string& data = "") const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e :
         std::filesystem::directory_iterator((data.empty() ? data_ : data) + "/images", ec))
      out.push_back(e.path().filename());
    return out;
  }
  std::string node_config(const std::string& cache_max = "20Gi") const {
    return "serve:\n  images:\n    registries: [\"" + registry_->host() +
           "\"]\n    insecure_registries: [\"" + registry_->host() +
           "\"]\n    cache_max: " + cache_max + "\n";
  }

  std::string dir_, data_, old_;
  std::unique_ptr<LoopbackRegistry> registry_;
};

TEST_F(ImagePull, TheCliPullsByDigestVerifiesItAndASandboxRunsOnIt) {
  const std::string digest = push("tiny", "pulled-by-digest");
  ASSERT_EQ(digest.size(), 71u) << digest;
  auto pulled = run_corral({"image", "pull", ref("tiny", digest), "--insecure"});
  ASSERT_EQ(pulled.exit_code, 0) << pulled.err;
  const std::string name = "sha256-" + digest.substr(7, 56);
  auto ls = run_corral({"image", "ls", "--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  const json images = json::parse(ls.out);
  ASSERT_EQ(images.size(), 1u) << ls.out;
  EXPECT_EQ(images[0]["name"], name);
  EXPECT_EQ(images[0]["digest"], digest);
  EXPECT_EQ(images[0]["source"], "registry:" + ref("tiny", digest));
  auto run = run_corral({"run", "--image", name, "--", "/bin/cat", "/etc/marker"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "pulled-by-digest");
  // A tag is not a digest; without --insecure the loopback registry's
  // plain HTTP is refused.
  auto by_tag = run_corral({"image", "pull", registry_->host() + "/tiny:v", "--insecure"});
  EXPECT_EQ(by_tag.exit_code, 2) << by_tag.err;
  EXPECT_NE(by_tag.err.find("a tag can move"), std::string::npos) << by_tag.err;
  auto tls = run_corral({"image", "pull", ref("tiny", digest), "--name", "again"});
  EXPECT_EQ(tls.exit_code, 1) << tls.err;
  for (const char* hostile :
       {"-x/y@sha256:", "../x@sha256:", "h/UPPER@sha256:", "h/a//b@sha256:"}) {
    auto r = run_corral({"image", "pull", hostile + std::string(64, 'a')});
    EXPECT_EQ(r.exit_code, 2) << hostile << ": " << r.err;
  }
  EXPECT_EQ(images_entries().size(), 1u) << "nothing but the one image was left";
}

TEST_F(ImagePull, AnImagePushedFromOneStoreIsPulledIntoAnotherByTheReferenceThePushPrints) {
  const std::string digest = push("tiny", "carried", "GREETING=hello");
  ASSERT_EQ(digest.size(), 71u) << digest;
  auto mine = run_corral({"image", "pull", ref("tiny", digest), "--name", "mine", "--insecure"});
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  auto pushed =
      run_corral({"image", "push", "mine", registry_->host() + "/moved:v2", "--insecure"});
  ASSERT_EQ(pushed.exit_code, 0) << pushed.err;
  // stdout is the reference alone, pinned by a new digest (a new layer).
  const std::string prefix = registry_->host() + "/moved@sha256:";
  ASSERT_EQ(pushed.out.rfind(prefix, 0), 0u) << pushed.out;
  ASSERT_EQ(pushed.out.size(), prefix.size() + 64 + 1) << pushed.out;
  const std::string pinned = pushed.out.substr(0, pushed.out.size() - 1);
  EXPECT_NE(pinned.substr(pinned.size() - 71), digest);
  // The tag names the same manifest.
  EXPECT_EQ(host_sh("skopeo inspect --tls-verify=false --format '{{.Digest}}' docker://" +
                    registry_->host() + "/moved:v2"),
            pinned.substr(pinned.size() - 71) + "\n");
  EXPECT_EQ(images_entries(), std::vector<std::string>{"mine"}) << "the push left its work behind";
  // The same image pushed again, under another tag: the same digest.
  auto again = run_corral({"image", "push", "mine", registry_->host() + "/moved:v3", "--insecure"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, pushed.out) << "a second push of one image made another digest";

  // Another node's store pulls it by that reference alone; a sandbox sees
  // the files, the env and the workdir the image had.
  const std::string other = dir_ + "/other";
  setenv("CORRAL_DATA_DIR", other.c_str(), 1);
  auto pulled = run_corral({"image", "pull", pinned, "--name", "theirs", "--insecure"});
  ASSERT_EQ(pulled.exit_code, 0) << pulled.err;
  auto run = run_corral({"run", "--image", "theirs", "--", "/bin/sh", "-c",
                         "cat /etc/marker; echo \" $GREETING\"; pwd"});
  setenv("CORRAL_DATA_DIR", data_.c_str(), 1);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "carried hello\n/etc\n");

  // What it refuses, and what it leaves behind then: nothing.
  for (const std::string& target :
       {std::string("noslash"), registry_->host() + "/UPPER:v", registry_->host() + "/x:-bad",
        registry_->host() + "/x@sha256:" + std::string(64, 'a'), std::string("-h/x:v"),
        registry_->host() + "/x:"}) {
    auto r = run_corral({"image", "push", "mine", target, "--insecure"});
    EXPECT_EQ(r.exit_code, 2) << target << ": " << r.err;
  }
  auto absent = run_corral({"image", "push", "absent", registry_->host() + "/x:v", "--insecure"});
  EXPECT_EQ(absent.exit_code, 1) << absent.err;
  EXPECT_NE(absent.err.find("absent"), std::string::npos) << absent.err;
  auto nobody = run_corral({"image", "push", "mine", "127.0.0.1:1/x:v", "--insecure"});
  EXPECT_EQ(nobody.exit_code, 1) << nobody.err;
  EXPECT_NE(nobody.err.find("127.0.0.1:1"), std::string::npos) << nobody.err;
  EXPECT_EQ(images_entries(), std::vector<std::string>{"mine"}) << "a failed push left its work";
}

TEST_F(ImagePull, BytesThatDoNotMatchTheDigestAreRefusedAndNothingIsKept) {
  const std::string digest = push("tiny", "original");
  ASSERT_EQ(digest.size(), 71u) << digest;
  // A digest the registry does not have.
  auto absent =
      run_corral({"image", "pull", ref("tiny", "sha256:" + std::string(64, '1')), "--insecure"});
  EXPECT_EQ(absent.exit_code, 1) << absent.err;
  // The registry's manifest replaced by other bytes under the same digest.
  const std::string manifest = stored_blob(digest);
  ASSERT_TRUE(std::filesystem::exists(manifest)) << manifest;
  std::string text;
  {
    std::ifstream in(manifest);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(manifest, std::ios::trunc) << text << " ";  // still valid JSON, another hash
  auto lying = run_corral({"image", "pull", ref("tiny", digest), "--insecure"});
  EXPECT_EQ(lying.exit_code, 1) << lying.err;
  EXPECT_NE(lying.err.find("hashes to"), std::string::npos) << lying.err;
  std::ofstream(manifest, std::ios::trunc) << text;  // the manifest back
  // A layer replaced by other bytes: skopeo or umoci finds it out.
  const json m = json::parse(text);
  const std::string layer = stored_blob(m["layers"][0]["digest"].get<std::string>());
  ASSERT_TRUE(std::filesystem::exists(layer)) << layer;
  { std::ofstream(layer, std::ios::trunc) << "not the layer"; }
  auto bad_layer = run_corral({"image", "pull", ref("tiny", digest), "--insecure"});
  EXPECT_EQ(bad_layer.exit_code, 1) << bad_layer.err;
  EXPECT_TRUE(images_entries().empty()) << "a refused pull left something in the image store";
}

TEST_F(ImagePull, ACreateNamingAnImageByDigestPullsItOnceFromAListedRegistryOnly) {
  const std::string one = push("tiny", "first");
  const std::string two = push("other", "second");
  ASSERT_EQ(one.size(), 71u);
  ASSERT_EQ(two.size(), 71u);
  ASSERT_NE(one, two);
  TestDaemon d({}, node_config("1Ki"));
  ASSERT_TRUE(d.ready()) << d.output();
  // Not on the node yet, named by digest alone: it cannot guess the registry.
  HttpReply r;
  EXPECT_TRUE(d.create_sandbox(json{{"image", one}}.dump(), &r).empty());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("no image with manifest"), std::string::npos) << r.body;
  // A registry the config does not list is never contacted.
  EXPECT_TRUE(d.create_sandbox(json{{"image", "10.9.9.9:5000/tiny@" + one}}.dump(), &r).empty());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("serve.images.registries"), std::string::npos) << r.body;

  const std::string id = d.create_sandbox(json{{"image", ref("tiny", one)}}.dump(), &r);
  ASSERT_FALSE(id.empty()) << r.status << " " << r.body << d.output();
  EXPECT_EQ(d.exec(id, "cat /etc/marker")["stdout"], "first");
  EXPECT_EQ(d.request("GET", "/v1/sandboxes/" + id).json()["spec"]["image"], ref("tiny", one))
      << "the stored spec keeps the reference asked for";
  // Now the node has it: by digest alone, and no second pull.
  const std::string again = d.create_sandbox(json{{"image", one}}.dump(), &r);
  ASSERT_FALSE(again.empty()) << r.body;
  EXPECT_EQ(d.exec(again, "cat /etc/marker")["stdout"], "first");
  EXPECT_EQ(d.wait_audit("image.pulled", 1).size(), 1u);
  // Cache bound 1 KiB: pulling the second image evicts the first once no
  // sandbox uses it and it was not taken in the last minute.
  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + again).status, 200);
  const std::string first_name = "sha256-" + one.substr(7, 56);
  const std::string lock = d.data_dir() + "/images/" + first_name + "/.lock";
  ASSERT_TRUE(std::filesystem::exists(lock)) << lock;
  host_sh("touch -d '2 hours ago' " + sh_quote(lock));
  const std::string third = d.create_sandbox(json{{"image", ref("other", two)}}.dump(), &r);
  ASSERT_FALSE(third.empty()) << r.body;
  EXPECT_EQ(d.exec(third, "cat /etc/marker")["stdout"], "second");
  const auto left = images_entries(d.data_dir());
  EXPECT_EQ(std::count(left.begin(), left.end(), first_name), 0) << "the least recently used went";
  EXPECT_EQ(std::count(left.begin(), left.end(), "sha256-" + two.substr(7, 56)), 1);
  EXPECT_EQ(d.wait_audit("image.evicted", 1).size(), 1u);
}

}  // namespace
}  // namespace corral::testing
