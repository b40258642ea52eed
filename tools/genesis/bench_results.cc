#include "tools/genesis/bench_results.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace genesis::cli {
namespace {

double UnitToNs(const std::string& unit) {
  if (unit == "us") return 1e3;
  if (unit == "ms") return 1e6;
  if (unit == "s") return 1e9;
  return 1;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Cv(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= v.size();
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= (v.size() - 1);
  return mean > 0 ? std::sqrt(var) / mean : 0;
}

struct Collected {
  std::vector<double> times, rates, bus_rates;
  double median_time = -1, median_rate = 0, median_bus_rate = 0, cv = 0;
  std::string error;
};

// Google Benchmark writes counters that are not numbers as bare NaN / Infinity (which
// Python's json reads but JSON does not allow): null outside strings instead.
std::string NullNonNumbers(const std::string& text) {
  static constexpr const char* kWords[] = {"-Infinity", "Infinity", "-NaN", "NaN", "-nan",
                                           "nan", "-inf", "inf"};
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    bool replaced = false;
    for (const char* w : kWords) {
      const size_t n = std::strlen(w);
      if (text.compare(i, n, w) == 0) {
        out += "null";
        i += n - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

double Number(const nlohmann::json& b, const char* key) {
  const auto it = b.find(key);
  return it != b.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

absl::StatusOr<BenchFile> ParseBenchFile(const std::string& text, const std::string& name) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(NullNonNumbers(text));
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not JSON (", e.what(), ")"));
  }
  if (!j.is_object() || !j.contains("benchmarks") ||
      !j["benchmarks"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": not a Google Benchmark JSON file (no \"benchmarks\" array)"));
  }
  BenchFile file;
  file.context = j.value("context", nlohmann::json::object());
  std::map<std::string, Collected> collected;
  for (const nlohmann::json& b : j["benchmarks"]) {
    if (!b.is_object()) continue;
    const std::string run_name = b.value("run_name", b.value("name", std::string()));
    if (run_name.empty()) continue;
    if (!collected.count(run_name)) file.order.push_back(run_name);
    Collected& c = collected[run_name];
    if (b.value("error_occurred", false)) {
      c.error = b.value("error_message", std::string("failed"));
      continue;
    }
    const double scale = UnitToNs(b.value("time_unit", std::string("ns")));
    const double time = Number(b, "real_time") * scale;
    const double rate = Number(b, "bytes_per_second");
    const double bus_rate = Number(b, "busbw_GBps") * 1e9;
    if (b.value("run_type", std::string("iteration")) == "aggregate") {
      const std::string agg = b.value("aggregate_name", std::string());
      if (agg == "median") {
        c.median_time = time;
        c.median_rate = rate;
        c.median_bus_rate = bus_rate;
      } else if (agg == "cv") {
        c.cv = Number(b, "real_time");
      }
      continue;
    }
    c.times.push_back(time);
    c.rates.push_back(rate);
    c.bus_rates.push_back(bus_rate);
  }
  for (const std::string& run_name : file.order) {
    const Collected& c = collected[run_name];
    BenchResult r;
    r.run_name = run_name;
    r.error = c.error;
    if (!c.times.empty()) {
      r.time_ns = Median(c.times);
      r.bytes_per_second = Median(c.rates);
      r.bus_bytes_per_second = Median(c.bus_rates);
      r.cv = Cv(c.times);
      r.repetitions = static_cast<int>(c.times.size());
    } else if (c.median_time >= 0) {
      r.time_ns = c.median_time;
      r.bytes_per_second = c.median_rate;
      r.bus_bytes_per_second = c.median_bus_rate;
      r.cv = c.cv;
      r.repetitions = 1;
    } else if (r.error.empty()) {
      r.error = "no measurement";
    }
    file.results[run_name] = r;
  }
  return file;
}

absl::StatusOr<BenchFile> ReadBenchFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseBenchFile(text.str(), path);
}

std::vector<std::string> ListJsonFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace genesis::cli
