/* Workload "lua": the Lua 5.4.7 interpreter (C sources of the crates.io
 * package lua-src 547.0.0, built by bench/run.sh with each
 * instrumentation) running a script that formats, sorts with a Lua
 * comparator, slices and counts N strings: a real, call-heavy C program
 * (the VM, tables, strings, the garbage collector). */
#include <stdlib.h>
#include "bench.h"
#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"

static const char *script =
    "local n = ...\n"
    "local t = {}\n"
    "for i = 1, n do t[i] = string.format('%05d:%s', (i * 7919) % n, tostring(i)) end\n"
    "table.sort(t, function(a, b) return a < b end)\n"
    "local words = {}\n"
    "for _, s in ipairs(t) do local k = s:sub(1, 3) words[k] = (words[k] or 0) + #s end\n"
    "local sum = 0\n"
    "for _, v in pairs(words) do sum = sum + v end\n"
    "return sum\n";

int main(int argc, char **argv) {
    BENCH_START();
    long n = argc > 1 ? atol(argv[1]) : 10000;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    double t0 = bench_now();
    if (luaL_loadstring(L, script) != LUA_OK)
        return 1;
    lua_pushinteger(L, n);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        fprintf(stderr, "lua: %s\n", lua_tostring(L, -1));
        return 1;
    }
    double t1 = bench_now();
    BENCH_REPORT(t1 - t0, lua_tointeger(L, -1));
    lua_close(L);
    return 0;
}
