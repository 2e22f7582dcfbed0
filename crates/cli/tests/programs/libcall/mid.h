long mid_len(const char *s);
long mid_calls(void);
