#include "shapes.hpp"
#include <stdexcept>

namespace shapes {

Shape::~Shape() {}
std::string Shape::name() const { return "shape"; }

Circle::Circle(double r) : r(r) {
    if (r < 0)
        throw std::invalid_argument("negative radius");
}
double Circle::area() const { return 3.0 * r * r; }
std::string Circle::name() const { return "circle"; }

static int local_counter(int x) { return scaled(x) + twice(x); }

double total(const Shape *const *all, int n) {
    double sum = local_counter(n);
    for (int i = 0; i < n; i++)
        sum += all[i]->area();
    return sum;
}

} // namespace shapes
