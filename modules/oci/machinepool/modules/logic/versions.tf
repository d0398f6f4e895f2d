terraform {
  # Built-in functions only: no provider, so `tofu test` runs offline.
  required_version = ">= 1.5.0"
}
