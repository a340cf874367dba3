// grid-node: runs one Tessera member until SIGINT/SIGTERM (node_main.h).
#include <cstdio>
#include <exception>

#include "node_main.h"

int main(int argc, char** argv) {
  try {
    return tessera::tools::node::RunNode(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grid-node: internal error: %s\n", e.what());
    return 1;
  }
}
