/* With unused_first.c: exits with 0 when run without arguments. */
int called(int x);

int main(int argc, char **argv) {
    (void)argv;
    return called(argc) - 2;
}
