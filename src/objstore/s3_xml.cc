#include "objstore/s3_xml.h"

#include <charconv>
#include <pugixml.hpp>

namespace corral::objstore {

Result<S3ListPage> parse_list_page(std::string_view xml) {
  pugi::xml_document doc;
  pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed) {
    return make_error(ErrorCode::kUnavailable, std::string("the list answer is not XML (") +
                                                   parsed.description() + ")");
  }
  pugi::xml_node result = doc.child("ListBucketResult");
  if (!result) {
    return make_error(ErrorCode::kUnavailable, "the list answer is not a ListBucketResult");
  }
  S3ListPage page;
  for (pugi::xml_node contents : result.children("Contents")) {
    S3ListPage::Entry entry;
    entry.key = contents.child_value("Key");
    std::string_view size = contents.child_value("Size");
    auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), entry.size);
    if (entry.key.empty() || ec != std::errc() || end != size.data() + size.size()) {
      return make_error(ErrorCode::kUnavailable,
                        "the list answer has an entry without a key or a size");
    }
    page.entries.push_back(std::move(entry));
  }
  page.truncated = std::string_view(result.child_value("IsTruncated")) == "true";
  page.next_token = result.child_value("NextContinuationToken");
  if (page.truncated && page.next_token.empty()) {
    return make_error(ErrorCode::kUnavailable,
                      "the list answer is truncated but has no NextContinuationToken");
  }
  return page;
}

S3ErrorBody parse_error_body(std::string_view xml) {
  S3ErrorBody out;
  pugi::xml_document doc;
  if (!doc.load_buffer(xml.data(), xml.size())) return out;
  pugi::xml_node error = doc.child("Error");
  out.code = error.child_value("Code");
  out.message = error.child_value("Message");
  return out;
}

}  // namespace corral::objstore
