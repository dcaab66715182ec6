// A program that does nothing, linked as the lessons are (lib/load_order.cmake):
// it uses the C++ runtime (an exception), as every lesson does, so that the
// runtime's libraries are named where a lesson names them.
#include <stdexcept>

int main(int argc, char**) {
  try {
    if (argc > 99) throw std::runtime_error("too many arguments");
  } catch (const std::exception&) {
    return 1;
  }
  return 0;
}
