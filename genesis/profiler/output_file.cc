#include "genesis/profiler/output_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace genesis::profiler {
namespace {

absl::Status Failed(const std::string& path, const char* what, int err) {
  const std::string msg = absl::StrCat("cannot ", what, " '", path, "': ", std::strerror(err));
  if (err == EACCES || err == EPERM || err == EROFS) return absl::PermissionDeniedError(msg);
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
  return absl::InternalError(msg);
}

}  // namespace

absl::Status WriteOutputFile(const std::string& path, std::string_view contents) {
  if (path.empty()) return absl::InvalidArgumentError("output path is empty");
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Failed(path, "create", errno);
  const size_t written = std::fwrite(contents.data(), 1, contents.size(), f);
  const int write_errno = errno;
  if (written != contents.size()) {
    std::fclose(f);
    return Failed(path, "write", write_errno);
  }
  if (std::fclose(f) != 0) return Failed(path, "write", errno);
  return absl::OkStatus();
}

}  // namespace genesis::profiler
