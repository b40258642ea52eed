// Writing a report or export to a file, with errors that name the path.
#ifndef GENESIS_PROFILER_OUTPUT_FILE_H_
#define GENESIS_PROFILER_OUTPUT_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace genesis::profiler {

// Replaces `path` with `contents`. InvalidArgument for an empty path; PermissionDenied /
// NotFound / Internal (with errno's text and the path) when it cannot be created or
// written completely.
absl::Status WriteOutputFile(const std::string& path, std::string_view contents);

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_OUTPUT_FILE_H_
