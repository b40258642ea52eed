#include "genesis/profiler/torch_snapshot.h"

#include <cstring>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "genesis/profiler/output_file.h"
#include "genesis/profiler/symbolize.h"

namespace genesis::profiler {
namespace {

using nlohmann::json;

int DeviceIndex(const SourceInfo& s) {
  int index = 0;
  if (absl::StartsWith(s.device, "cuda:") && absl::SimpleAtoi(s.device.substr(5), &index)) {
    return index;
  }
  return 0;
}

std::string_view BlockState(memory::CachingAllocator::BlockState state) {
  using S = memory::CachingAllocator::BlockState;
  switch (state) {
    case S::kAllocated:
      return "active_allocated";
    case S::kPendingFree:
      return "active_pending_free";
    default:
      return "inactive";
  }
}

void AppendInt(std::string* out, int64_t v) {
  if (v >= 0 && v <= 0xff) {
    out->push_back('K');  // BININT1
    out->push_back(static_cast<char>(v));
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    out->push_back('J');  // BININT
    const auto u = static_cast<uint32_t>(static_cast<int32_t>(v));
    for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(u >> (8 * i)));
  } else {
    out->push_back('\x8a');  // LONG1: little-endian two's complement
    out->push_back(8);
    const auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(u >> (8 * i)));
  }
}

void AppendPickle(std::string* out, const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      out->push_back('N');
      break;
    case json::value_t::boolean:
      out->push_back(v.get<bool>() ? '\x88' : '\x89');
      break;
    case json::value_t::number_integer:
      AppendInt(out, v.get<int64_t>());
      break;
    case json::value_t::number_unsigned: {
      const uint64_t u = v.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) {
        AppendInt(out, static_cast<int64_t>(u));
      } else {
        out->push_back('\x8a');
        out->push_back(9);  // One more byte keeps it positive.
        for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(u >> (8 * i)));
        out->push_back(0);
      }
      break;
    }
    case json::value_t::number_float: {
      out->push_back('G');  // BINFLOAT, big-endian
      const double d = v.get<double>();
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>(bits >> (8 * i)));
      break;
    }
    case json::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      out->push_back('X');  // BINUNICODE
      const auto n = static_cast<uint32_t>(s.size());
      for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(n >> (8 * i)));
      out->append(s);
      break;
    }
    case json::value_t::array:
      out->push_back(']');  // EMPTY_LIST
      if (!v.empty()) {
        out->push_back('(');  // MARK
        for (const json& item : v) AppendPickle(out, item);
        out->push_back('e');  // APPENDS
      }
      break;
    case json::value_t::object:
      out->push_back('}');  // EMPTY_DICT
      if (!v.empty()) {
        out->push_back('(');
        for (const auto& [key, item] : v.items()) {
          AppendPickle(out, json(key));
          AppendPickle(out, item);
        }
        out->push_back('u');  // SETITEMS
      }
      break;
    default:
      out->push_back('N');
  }
}

}  // namespace

std::string ToPickle(const json& value) {
  std::string out = "\x80\x02";  // PROTO 2
  AppendPickle(&out, value);
  out.push_back('.');  // STOP
  return out;
}

json TorchSnapshot(const History& h, size_t max_trace_entries) {
  Symbolizer symbolizer;
  symbolizer.Resolve(h.stacks);
  std::vector<json> stack_frames(h.stacks.size());
  for (size_t i = 0; i < h.stacks.size(); ++i) {
    json frames = json::array();
    for (const Frame& f : symbolizer.Frames(h.stacks[i])) {
      frames.push_back({{"filename", f.file.empty() ? "??" : f.file}, {"line", f.line},
                        {"name", f.function}});
    }
    stack_frames[i] = std::move(frames);
  }
  auto frames_of = [&](const Event& e) {
    return e.stack >= 0 ? stack_frames[e.stack] : json::array();
  };

  json segments = json::array();
  int max_device = 0;
  for (const SourceInfo& s : h.sources) {
    const int device = DeviceIndex(s);
    max_device = std::max(max_device, device);
    for (const auto& seg : s.segments) {
      json blocks = json::array();
      uint64_t allocated = 0, active = 0, requested = 0;
      for (const auto& b : seg.blocks) {
        if (b.state == memory::CachingAllocator::BlockState::kUnmapped) continue;
        blocks.push_back({{"address", reinterpret_cast<uintptr_t>(b.address)},
                          {"size", b.size},
                          {"requested_size", b.requested},
                          {"state", BlockState(b.state)},
                          {"frames", json::array()}});
        if (b.state == memory::CachingAllocator::BlockState::kAllocated) allocated += b.size;
        if (b.state == memory::CachingAllocator::BlockState::kAllocated ||
            b.state == memory::CachingAllocator::BlockState::kPendingFree) {
          active += b.size;
        }
        requested += b.requested;
      }
      segments.push_back(
          {{"device", device},
           {"address", reinterpret_cast<uintptr_t>(seg.address)},
           {"total_size", seg.expandable ? seg.mapped_bytes : seg.size},
           {"allocated_size", allocated},
           {"active_size", active},
           {"requested_size", requested},
           {"stream", seg.stream},
           {"segment_type",
            seg.pool == memory::CachingAllocator::PoolKind::kSmall ? "small" : "large"},
           {"segment_pool_id", json::array({0, 0})},
           {"is_expandable", seg.expandable},
           {"frames", json::array()},
           {"blocks", std::move(blocks)}});
    }
  }
  std::vector<std::vector<json>> traces(static_cast<size_t>(max_device) + 1);
  for (const Event& e : h.events) {
    if (e.source < 0 || e.source >= static_cast<int>(h.sources.size())) continue;
    auto& trace = traces[DeviceIndex(h.sources[e.source])];
    const double time_us = static_cast<double>(e.time_ns) / 1000.0;
    auto entry = [&](const char* action) {
      trace.push_back({{"action", action}, {"addr", e.address}, {"size", e.size},
                       {"stream", e.stream}, {"time_us", time_us}, {"frames", frames_of(e)}});
    };
    switch (e.kind) {
      case EventKind::kAlloc:
        entry("alloc");
        break;
      case EventKind::kFree:
        entry("free_requested");
        entry("free_completed");
        break;
      case EventKind::kSegmentAlloc:
        entry("segment_alloc");
        break;
      case EventKind::kSegmentFree:
        entry("segment_free");
        break;
      case EventKind::kSegmentMap:
        entry("segment_map");
        break;
      case EventKind::kSegmentUnmap:
        entry("segment_unmap");
        break;
      case EventKind::kOom: {
        int64_t device_free = 0;
        if (e.aux >= 0 && e.aux < static_cast<int>(h.oom_states.size())) {
          const auto& st = h.oom_states[e.aux];
          device_free = st.all.reserved_bytes.current - st.all.allocated_bytes.current;
        }
        trace.push_back({{"action", "oom"}, {"device_free", device_free}, {"size", e.size},
                         {"stream", e.stream}, {"time_us", time_us}, {"frames", frames_of(e)}});
        break;
      }
      case EventKind::kMarker:
        break;
    }
  }
  json device_traces = json::array();
  for (auto& trace : traces) {
    json t = json::array();
    const size_t skip = trace.size() > max_trace_entries ? trace.size() - max_trace_entries : 0;
    for (size_t i = skip; i < trace.size(); ++i) t.push_back(std::move(trace[i]));
    device_traces.push_back(std::move(t));
  }
  return {{"segments", std::move(segments)},
          {"device_traces", std::move(device_traces)},
          {"allocator_settings", json::object()},
          {"external_annotations", json::array()}};
}

absl::Status WriteTorchSnapshotJson(const History& history, const std::string& path) {
  return WriteOutputFile(path, TorchSnapshot(history).dump());
}

absl::Status WriteTorchSnapshotPickle(const History& history, const std::string& path) {
  return WriteOutputFile(path, ToPickle(TorchSnapshot(history)));
}

}  // namespace genesis::profiler
