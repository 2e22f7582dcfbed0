// -a on C++ (#20): a member function (its `this` first, then a reference,
// shown as addresses), a free function taking a reference, and one taking
// and returning `std::string`s (by reference and by value: both passed by
// address; the result through the hidden pointer). Each prints its call as
// `fntrace replay` shows it, just before it returns (doubles in C's exact
// %a; strings of more than 128 characters cut there, as fntrace keeps them).
#include <cstdio>
#include <string>

namespace shop {
struct Cart {
    long total = 0;
    __attribute__((noipa)) long add(int qty, double price, const long &bonus) {
        total += qty * (long)price + bonus;
        std::printf("shop::Cart::add(%#lx, %d, %a, %#lx) = %ld\n", (unsigned long)this, qty, price,
                    (unsigned long)&bonus, total);
        return total;
    }
};
} // namespace shop

__attribute__((noipa)) int scale(int &x, short k) {
    x *= k;
    std::printf("scale(%#lx, %d) = %d\n", (unsigned long)&x, k, x);
    return x;
}

static std::string shown(const std::string &s) {
    if (s.size() > 128)
        return "\"" + s.substr(0, 128) + "\"...";
    return "\"" + s + "\"";
}

__attribute__((noipa)) std::string label(const std::string &name, std::string suffix, int n) {
    std::string r = name + suffix + std::to_string(n);
    std::printf("label(%s, %s, %d) = %s\n", shown(name).c_str(), shown(suffix).c_str(), n, shown(r).c_str());
    return r;
}

int main() {
    shop::Cart cart;
    long bonus = 5;
    cart.add(3, 2.5, bonus);
    cart.add(-1, 0.25, bonus);
    int v = 7;
    scale(v, -2);
    std::string name = "cart";
    std::string again = label(name, "-", v);
    label(std::string(150, 'x'), again, 1);
    label("", "", 0);
    return 0;
}
