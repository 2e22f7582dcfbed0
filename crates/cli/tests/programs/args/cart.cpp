// -a on C++ (#20): a member function (its `this` first, then a reference,
// shown as addresses) and a free function taking a reference. Each prints
// its call as `fntrace replay` shows it, just before it returns (doubles in
// C's exact %a).
#include <cstdio>

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

int main() {
    shop::Cart cart;
    long bonus = 5;
    cart.add(3, 2.5, bonus);
    cart.add(-1, 0.25, bonus);
    int v = 7;
    scale(v, -2);
    return 0;
}
