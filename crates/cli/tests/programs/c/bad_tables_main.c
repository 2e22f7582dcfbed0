int good(void);
int main(void) { return good() == 7 ? 0 : 1; }
