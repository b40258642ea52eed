#include "genesis/distributed/store.h"

#include <chrono>
#include <filesystem>
#include <system_error>
#include <utility>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/hash_store.h"

namespace genesis::distributed {

Store::Store(std::unique_ptr<gloo::rendezvous::Store> store, std::string description,
             std::string remove_when_done)
    : store_(std::move(store)),
      description_(std::move(description)),
      remove_when_done_(std::move(remove_when_done)) {}

Store::~Store() {
  store_.reset();
  if (!remove_when_done_.empty()) {
    std::error_code ignored;  // Best effort: another process may be removing it too.
    std::filesystem::remove_all(remove_when_done_, ignored);
  }
}

absl::StatusOr<std::shared_ptr<Store>> Store::File(const std::string& directory,
                                                   bool remove_when_done) {
  if (directory.empty()) {
    return absl::InvalidArgumentError("file store: the directory is empty");
  }
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("file store: cannot create directory '",
                                                    directory, "': ", error.message()));
  }
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("file store: directory '", directory, "' is not writable"));
  }
  try {
    return std::shared_ptr<Store>(
        new Store(std::make_unique<gloo::rendezvous::FileStore>(directory),
                  absl::StrCat("file store at ", directory),
                  remove_when_done ? directory : std::string()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("file store at '", directory, "': ", e.what()));
  }
}

std::shared_ptr<Store> Store::Hash() {
  return std::shared_ptr<Store>(
      new Store(std::make_unique<gloo::rendezvous::HashStore>(), "hash store", ""));
}

absl::Status Store::Set(const std::string& key, absl::Span<const char> value) {
  try {
    store_->set(key, std::vector<char>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat(description_, ": cannot set '", key, "': ", e.what()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<char>> Store::Get(const std::string& key, absl::Duration timeout) {
  try {
    store_->wait({key}, absl::ToChronoMilliseconds(timeout));
    return store_->get(key);
  } catch (const gloo::IoException& e) {
    return absl::DeadlineExceededError(absl::StrCat(description_, ": key '", key,
                                                    "' not set within ",
                                                    absl::FormatDuration(timeout), ": ",
                                                    e.what()));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat(description_, ": cannot get '", key, "': ", e.what()));
  }
}

}  // namespace genesis::distributed
