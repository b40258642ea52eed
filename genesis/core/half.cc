#include "genesis/core/half.h"

#include <ostream>

namespace genesis {

std::ostream& operator<<(std::ostream& os, Half value) {
  return os << static_cast<float>(value);
}

std::ostream& operator<<(std::ostream& os, BFloat16 value) {
  return os << static_cast<float>(value);
}

}  // namespace genesis
