// A file that parses without LibTorch, for tests about the command line itself.
int twice(int X) { return 2 * X; }
