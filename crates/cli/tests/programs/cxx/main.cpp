#include "shapes.hpp"
#include <cstdio>
#include <stdexcept>

static int local_counter(int x) { return shapes::scaled(x) - 1; }

int main(int argc, char **) {
    shapes::Circle c(argc);
    shapes::Square s(2);
    const shapes::Shape *all[] = {&c, &s};
    double t = shapes::total(all, 2) + shapes::twice(1.5) + local_counter(argc);
    try {
        shapes::Circle bad(-1);
    } catch (const std::invalid_argument &e) {
        t += 1;
    }
    std::printf("%.1f %s\n", t, c.name().c_str());
    return 0;
}
