from django.apps import AppConfig


class DashboardsConfig(AppConfig):
    name = "apps.dashboards"
    label = "dashboards"

    def ready(self) -> None:
        from apps.dashboards.whatif_urls import whatif_page_url
        from apps.whatif.page_link import whatif_page_link_register

        whatif_page_link_register(whatif_page_url)
