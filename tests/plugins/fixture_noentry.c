/* Fixture: a shared object without plume_plugin_entry (not a plume plugin). */
int fixture_not_a_plugin(void);
int fixture_not_a_plugin(void) { return 42; }
