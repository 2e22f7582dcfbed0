#include "bag.hpp"
#include <cstdio>

int main(int argc, char **) {
    int n = argc + 9;
    Bag<int> results;
    results.add(fill_ints(n));
    results.add(static_cast<int>(fill_doubles(n)));
    results.add(mix(n));
    std::printf("%d %d\n", results.sum(), twice(n));
    return 0;
}
