// docs/openapi.yaml against the server: every route the daemon has
// (ApiRouter::routes(), the route table of src/daemon/api_router.cc) is
// described there, and it describes no route the daemon lacks. The same for
// the stable error codes (api::error_codes()), which the file and
// docs/api.md list.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "api/api_model.h"
#include "daemon/api_router.h"

#ifndef CORRAL_TEST_SOURCE_DIR
#error "CORRAL_TEST_SOURCE_DIR must name the source tree (tests/CMakeLists.txt)"
#endif

namespace corral {
namespace {

const std::string kOpenApiPath = std::string(CORRAL_TEST_SOURCE_DIR) + "/docs/openapi.yaml";
const std::string kApiDocPath = std::string(CORRAL_TEST_SOURCE_DIR) + "/docs/api.md";

constexpr const char* kHttpMethods[] = {"get",  "put",     "post", "delete",
                                        "patch", "head", "options", "trace"};

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return s;
}

// Loads the OpenAPI file; fails the test (and returns a null node) when it
// is missing or not YAML.
YAML::Node load_openapi() {
  try {
    return YAML::LoadFile(kOpenApiPath);
  } catch (const std::exception& e) {
    ADD_FAILURE() << kOpenApiPath << ": " << e.what();
    return YAML::Node();
  }
}

std::string describe(const std::set<std::string>& items) {
  std::ostringstream out;
  for (const auto& i : items) out << "\n    " << i;
  return items.empty() ? std::string(" (none)") : out.str();
}

TEST(OpenApiRoutes, EveryServerRouteIsDocumentedAndNothingElse) {
  YAML::Node doc = load_openapi();
  ASSERT_TRUE(doc.IsMap()) << kOpenApiPath << " is not a YAML map";
  EXPECT_EQ(doc["openapi"].as<std::string>(""), "3.0.3");
  YAML::Node paths = doc["paths"];
  ASSERT_TRUE(paths.IsMap()) << kOpenApiPath << " has no paths map";

  std::set<std::string> documented;
  for (auto it = paths.begin(); it != paths.end(); ++it) {
    const std::string path = it->first.as<std::string>();
    ASSERT_TRUE(it->second.IsMap()) << path << " is not a map";
    int operations = 0;
    for (const char* m : kHttpMethods) {
      if (it->second[m]) {
        documented.insert(upper(m) + " " + path);
        ++operations;
      }
    }
    EXPECT_GT(operations, 0) << path << " has no operation";
  }

  std::set<std::string> served;
  for (const auto& r : daemon::ApiRouter::routes()) {
    EXPECT_TRUE(served.insert(r.method + " " + r.pattern).second)
        << "the server lists " << r.method << " " << r.pattern << " twice";
  }
  ASSERT_FALSE(served.empty());

  std::set<std::string> missing_in_doc, missing_in_server;
  for (const auto& s : served)
    if (!documented.count(s)) missing_in_doc.insert(s);
  for (const auto& d : documented)
    if (!served.count(d)) missing_in_server.insert(d);
  EXPECT_TRUE(missing_in_doc.empty() && missing_in_server.empty())
      << "routes of the server missing in docs/openapi.yaml:" << describe(missing_in_doc)
      << "\n  routes of docs/openapi.yaml the server does not have:"
      << describe(missing_in_server);
}

// Every operation needs the bearer key (the global security), except
// GET /healthz and GET /readyz, which opt out with an empty list.
TEST(OpenApiRoutes, BearerAuthOnEverythingButHealthzAndReadyz) {
  YAML::Node doc = load_openapi();
  ASSERT_TRUE(doc.IsMap());
  YAML::Node global = doc["security"];
  ASSERT_TRUE(global.IsSequence() && global.size() == 1 && global[0]["bearerAuth"])
      << "the global security must be [bearerAuth]";
  YAML::Node scheme = doc["components"]["securitySchemes"]["bearerAuth"];
  ASSERT_TRUE(scheme.IsMap());
  EXPECT_EQ(scheme["type"].as<std::string>(""), "http");
  EXPECT_EQ(scheme["scheme"].as<std::string>(""), "bearer");

  std::set<std::string> open;
  for (auto it = doc["paths"].begin(); it != doc["paths"].end(); ++it) {
    for (const char* m : kHttpMethods) {
      YAML::Node op = it->second[m];
      if (!op || !op["security"]) continue;
      YAML::Node sec = op["security"];
      const std::string name = upper(m) + " " + it->first.as<std::string>();
      if (sec.IsSequence() && sec.size() == 0) {
        open.insert(name);
      } else {
        ADD_FAILURE() << name << " overrides security with something else than []";
      }
    }
  }
  EXPECT_EQ(open, (std::set<std::string>{"GET /healthz", "GET /readyz"}));
}

// The error schema's code enum is exactly the server's stable code table,
// and docs/api.md has a table row "| `code` | status |" for each.
TEST(OpenApiRoutes, ErrorCodesMatchTheServerTable) {
  YAML::Node doc = load_openapi();
  ASSERT_TRUE(doc.IsMap());
  YAML::Node codes = doc["components"]["schemas"]["ErrorBody"]["properties"]["code"]["enum"];
  ASSERT_TRUE(codes.IsSequence()) << "components.schemas.ErrorBody.properties.code.enum missing";
  std::set<std::string> documented;
  for (const auto& c : codes) documented.insert(c.as<std::string>());

  std::ifstream md(kApiDocPath);
  ASSERT_TRUE(md.good()) << kApiDocPath;
  std::stringstream text;
  text << md.rdbuf();

  std::set<std::string> served;
  for (const auto& info : api::error_codes()) {
    const std::string code(info.code);
    served.insert(code);
    const std::string row = "| `" + code + "` | " + std::to_string(info.http_status) + " |";
    EXPECT_NE(text.str().find(row), std::string::npos)
        << "docs/api.md lacks the error table row " << row;
  }
  std::set<std::string> missing_in_doc, extra_in_doc;
  for (const auto& s : served)
    if (!documented.count(s)) missing_in_doc.insert(s);
  for (const auto& d : documented)
    if (!served.count(d)) extra_in_doc.insert(d);
  EXPECT_TRUE(missing_in_doc.empty() && extra_in_doc.empty())
      << "codes of api::error_codes() missing in docs/openapi.yaml:" << describe(missing_in_doc)
      << "\n  codes of docs/openapi.yaml the server does not have:" << describe(extra_in_doc);
}

}  // namespace
}  // namespace corral
