// genesis.profiler's engine: ProfileMemory (genesis/profiler/profile_memory.h), whose
// reports come to Python as JSON text that genesis/profiler.py turns into dicts.
#include <cstdint>
#include <memory>
#include <string>

#include <pybind11/pybind11.h>

#include "genesis/profiler/leak_report.h"
#include "genesis/profiler/picture.h"
#include "genesis/profiler/profile_memory.h"
#include "genesis/profiler/summary.h"
#include "python/src/bindings.h"
#include "python/src/errors.h"

namespace genesis::python {

namespace py = pybind11;
using profiler::ProfileMemory;

void RegisterProfiler(py::module_& m) {
  py::class_<ProfileMemory>(m, "_ProfileMemory",
                            "Records what every pool of the process does (profile_memory.h).")
      .def(py::init([](bool stacks, int stack_depth, size_t ring_events) {
             profiler::ProfileMemoryOptions options;
             options.recorder.stacks = stacks;
             options.recorder.stack_depth = stack_depth;
             options.recorder.ring_events = ring_events;
             return std::make_unique<ProfileMemory>(options);
           }),
           py::arg("stacks") = false, py::arg("stack_depth") = 16,
           py::arg("ring_events") = size_t{1} << 16)
      .def("start", [](ProfileMemory& p) { ThrowIfError(p.Start()); })
      .def("stop", [](ProfileMemory& p) { ThrowIfError(p.Stop()); })
      .def_property_readonly("running", &ProfileMemory::running)
      .def("mark", &ProfileMemory::Mark, py::arg("name"))
      .def("summary_text", [](const ProfileMemory& p) { return Unwrap(p.Summary()).ToText(); })
      .def("summary_json", [](const ProfileMemory& p) { return Unwrap(p.Summary()).ToJson().dump(); })
      .def("leaks_text",
           [](const ProfileMemory& p) {
             // Symbolizing may run addr2line.
             return WithoutGil([&] { return p.CheckMemoryLeaks(); }).ToText();
           })
      .def("leaks_json",
           [](const ProfileMemory& p) {
             return WithoutGil([&] { return p.CheckMemoryLeaks(); }).ToJson().dump();
           })
      .def("large_allocations_json",
           [](const ProfileMemory& p, uint64_t min_bytes) {
             return profiler::LargeAllocationsJson(
                        WithoutGil([&] { return p.LargeAllocations(min_bytes); }))
                 .dump();
           },
           py::arg("min_bytes"))
      .def("write_chrome_trace",
           [](const ProfileMemory& p, const std::string& path) {
             WithoutGil([&] { return p.WriteChromeTrace(path); });
           })
      .def("write_torch_snapshot",
           [](const ProfileMemory& p, const std::string& path) {
             WithoutGil([&] { return p.WriteTorchSnapshot(path); });
           })
      .def("write_replay_trace",
           [](const ProfileMemory& p, const std::string& path) {
             WithoutGil([&] { return p.WriteReplayTrace(path); });
           })
      .def("write_picture",
           [](const ProfileMemory& p, const std::string& path, int width, int height,
              const std::string& title) {
             profiler::PictureOptions options;
             options.width = width;
             options.height = height;
             options.title = title;
             WithoutGil([&] { return p.WritePicture(path, options); });
           },
           py::arg("path"), py::arg("width") = 1200, py::arg("height") = 800,
           py::arg("title") = "Memory profile");
}

}  // namespace genesis::python
