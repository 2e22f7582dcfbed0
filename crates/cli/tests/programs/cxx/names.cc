// Template-heavy names for --demangle: what uftrace and fntrace show.
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#define NOINLINE __attribute__((noinline))

namespace shapes {
template <typename T> struct Box {
    T value;
    NOINLINE T get() const { return value; }
    NOINLINE bool operator<(const Box& o) const { return value < o.value; }
};

template <typename T>
NOINLINE typename std::enable_if<std::is_same<T, int>::value, T>::type only_int(T x) { return x + 1; }

template <typename K, typename V>
NOINLINE std::size_t fill(std::map<K, V>& m, int n) {
    for (int i = 0; i < n; i++) m[K(i)] = V(i);
    return m.size();
}

struct Counter {
    int n = 0;
    NOINLINE int operator()(int x) { return n += x; }
    NOINLINE ~Counter() { n = 0; }
};
}  // namespace shapes

NOINLINE static int join(const std::vector<std::string>& parts) {
    int total = 0;
    for (const auto& p : parts) total += (int)p.size();
    return total;
}

int main() {
    std::map<int, double> m;
    shapes::Box<int> a{1}, b{2};
    shapes::Counter c;
    int r = (int)shapes::fill(m, 3) + shapes::only_int(4) + a.get() + (a < b) + c(5);
    r += join({"a", "bc"});
    return r == 18 ? 0 : 1;
}
