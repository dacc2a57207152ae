/* Calls into consumer_plugin, a shared object with librlx.a linked in: the
 * static library must be position-independent for that link to succeed. */
int consumer_check(void);

int main(void) { return consumer_check(); }
