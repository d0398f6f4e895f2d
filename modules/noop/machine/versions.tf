terraform {
  # terraform_data needs 1.4; nothing here needs a provider download.
  required_version = ">= 1.5"
}
