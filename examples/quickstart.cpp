// Placeholder: the real quickstart (linear attention on random Q, K, V) replaces this.
#include <kattn/kattn.hpp>

int main() { return 0; }
