/* layer_check_main.c — the main of the layer link checks (CMakeLists.txt):
 * nothing runs; what matters is that the layer's objects and those of the
 * layers below it link with nothing else. */
int main(void) {
  return 0;
}
