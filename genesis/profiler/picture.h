// A picture (PNG) of a recorded history: allocated and reserved bytes of each pool over
// time with the markers, and the blocks alive at the highest peak grouped by call site.
// Drawn by matplotlib through a small Python script (plot_memory.py, built into the
// binary), so python3 with matplotlib must be installed (Debian: python3-matplotlib).
#ifndef GENESIS_PROFILER_PICTURE_H_
#define GENESIS_PROFILER_PICTURE_H_

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "genesis/profiler/history.h"

namespace genesis::profiler {

struct PictureOptions {
  // Pixels; the PNG has exactly this size.
  int width = 1200;
  int height = 800;
  int dpi = 100;
  std::string title = "Memory profile";
  // Call sites shown in the lower panel.
  int max_sites = 12;
};

// What the script draws (exposed for tests).
nlohmann::json PictureData(const History& history, const PictureOptions& options);

// Writes the PNG to `path`. Errors: InvalidArgument for sizes outside 100..10000 pixels or
// a path with a quote; the output file's errors (unwritable path) first; FailedPrecondition
// naming what to install when no python3 with matplotlib is found (GENESIS_PYTHON, then
// python3 on the PATH, then /usr/bin/python3 are tried); Internal with the script's output
// if it fails otherwise.
absl::Status WritePicture(const History& history, const std::string& path,
                          const PictureOptions& options = PictureOptions());

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_PICTURE_H_
