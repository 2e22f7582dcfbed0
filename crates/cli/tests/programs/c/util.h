int util_sum(int n);
int util_helper_value(int x);
int util_varargs(int count, ...);
