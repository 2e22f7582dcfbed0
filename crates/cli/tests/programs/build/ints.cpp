#include "bag.hpp"

int fill_ints(int n) {
    Bag<int> bag;
    for (int i = 0; i < n; i++)
        bag.add(mix(i));
    return bag.sum() + twice(n);
}
