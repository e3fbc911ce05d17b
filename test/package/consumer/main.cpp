#include <accelerate/accelerate.h>

#include <iostream>

int main() {
  const auto info = accelerate::detect_process_info();
  std::cout << "consumer: rank " << info.rank << " of " << info.world_size << "\n";
  return info.world_size == 1 ? 0 : 1;
}
