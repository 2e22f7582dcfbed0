#include "bag.hpp"

/* main.cpp has no function of this name; a static function is local. */
static NOINLINE double half(double x) { return x / 2; }

double fill_doubles(int n) {
    Bag<int> ints;
    Bag<double> halves;
    for (int i = 0; i < n; i++) {
        ints.add(mix(i));
        halves.add(half(i));
    }
    return ints.sum() + halves.sum() + twice(1.5);
}
