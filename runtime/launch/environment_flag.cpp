#include "environment_flag.h"

namespace accelerate::launch {

bool is_truthy(const std::string &text) {
  return text == "1" || text == "true" || text == "True" || text == "TRUE" || text == "yes";
}

} // namespace accelerate::launch
